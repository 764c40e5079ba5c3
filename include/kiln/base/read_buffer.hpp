// A vector for bytes that a read is about to fill: resizing it leaves new
// elements of trivial types uninitialised instead of zeroing them first.
// Zeroing a shard's tokens just before pread overwrites them was 9 % of the
// loader's time on shards read whole.
#pragma once

#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace kiln {

template <class T>
struct DefaultInitAllocator : std::allocator<T> {
    template <class U>
    struct rebind {
        using other = DefaultInitAllocator<U>;
    };
    DefaultInitAllocator() noexcept = default;
    template <class U>
    DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}

    template <class U>
    void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
        ::new (static_cast<void*>(p)) U;  // default-, not value-initialised
    }
    template <class U, class... Args>
    void construct(U* p, Args&&... args) {
        ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
};

template <class T>
using ReadBuffer = std::vector<T, DefaultInitAllocator<T>>;

}  // namespace kiln
