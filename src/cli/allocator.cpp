// SPDX-License-Identifier: Apache-2.0
// The executable's memory allocator (docs/performance.md "Memory allocator"). When ipusim is
// linked with mimalloc (IPUSIM_MIMALLOC), mimalloc's malloc serves the whole process and its
// heap is backed by 2 MiB transparent huge pages: a compiled ResNet-50 step touches ~90 MB, and
// with 4 KiB pages every first touch is a page fault (20,000 of them, about half of a
// `run --run` on a virtual machine). The option must be set before any shared library's static
// constructors allocate, so it is set from the executable's .preinit_array, which the dynamic
// loader runs first.
//
// The global operator new and delete are defined here over malloc and free: mimalloc's own
// operator new aborts when memory runs out (its C code cannot throw), where the C++ contract,
// and main()'s report of a resource error (docs/errors.md, exit status 6), need std::bad_alloc.
#ifdef IPUSIM_HAVE_MIMALLOC
#include <mimalloc.h>

#include <cstddef>
#include <cstdlib>
#include <new>

namespace {

void use_huge_pages(int /*argc*/, char** /*argv*/, char** /*envp*/) {
  mi_option_enable(mi_option_large_os_pages);
}

void* allocate(std::size_t bytes) {
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
  throw std::bad_alloc();
}

void* allocate_aligned(std::size_t bytes, std::align_val_t alignment) {
  if (void* p = mi_malloc_aligned(bytes == 0 ? 1 : bytes, static_cast<std::size_t>(alignment)))
    return p;
  throw std::bad_alloc();
}

}  // namespace

using PreinitFunction = void (*)(int, char**, char**);
__attribute__((section(".preinit_array"), used)) static const PreinitFunction kPreinit =
    &use_huge_pages;

void* operator new(std::size_t bytes) { return allocate(bytes); }
void* operator new[](std::size_t bytes) { return allocate(bytes); }
void* operator new(std::size_t bytes, const std::nothrow_t&) noexcept {
  return std::malloc(bytes == 0 ? 1 : bytes);
}
void* operator new[](std::size_t bytes, const std::nothrow_t&) noexcept {
  return std::malloc(bytes == 0 ? 1 : bytes);
}
void* operator new(std::size_t bytes, std::align_val_t alignment) {
  return allocate_aligned(bytes, alignment);
}
void* operator new[](std::size_t bytes, std::align_val_t alignment) {
  return allocate_aligned(bytes, alignment);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { mi_free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { mi_free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { mi_free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { mi_free(p); }
#endif
