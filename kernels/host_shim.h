// Lets g++ build a CUDA kernel source for the CPU, so CI (no GPU) runs the kernel's real logic.
// Include this, then the .cu file, then call SHIM_LAUNCH(kernel, grid, block, args...). Blocks run one after the
// other. A block's threads run as coroutines on one CPU thread (ucontext): each runs until its next __syncthreads(),
// then the next thread runs, so every thread reaches a barrier before any passes it, as on a GPU. __shared__
// variables are static: one copy, which the blocks, running in turn, each use in full. Warp shuffles and atomics are
// out of scope.
#pragma once
#include <algorithm>
#include <cmath>
#include <ucontext.h>
#include <vector>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>  // a finished thread's stack keeps its frames' poison: cleared before reuse
#define SHIM_UNPOISON(stack) ASAN_UNPOISON_MEMORY_REGION((stack).data(), (stack).size())
#else
#define SHIM_UNPOISON(stack) (void)(stack)
#endif

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static

struct dim3 { unsigned int x = 1, y = 1, z = 1; };
static thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;

using std::min;
using std::max;

struct ShimBlock {
    std::vector<ucontext_t> threads;
    std::vector<std::vector<char>> stacks;
    std::vector<bool> returned;
    ucontext_t launcher;
    unsigned running = 0, finished = 0;
};
static thread_local ShimBlock shim_block;

// The block's next thread that has not returned, after `from` (the launcher once all have).
inline ucontext_t* shim_next(unsigned from) {
    if (shim_block.finished == blockDim.x) return &shim_block.launcher;
    unsigned next = (from + 1) % blockDim.x;
    while (shim_block.returned[next]) next = (next + 1) % blockDim.x;
    threadIdx.x = shim_block.running = next;
    return &shim_block.threads[next];
}

inline void __syncthreads() {
    const unsigned me = shim_block.running;
    swapcontext(&shim_block.threads[me], shim_next(me));
    threadIdx.x = shim_block.running = me;
}

// Each thread runs `body` (the kernel call), then hands on to the next; uc_link is unused.
template <typename Body> void shim_thread(Body* body) {
    (*body)();
    shim_block.returned[shim_block.running] = true;
    ++shim_block.finished;
    // A finished thread never runs again: the others pass its barriers without it, as CUDA requires none to remain.
    setcontext(shim_next(shim_block.running));
}

template <typename Body> void shim_trampoline(unsigned high, unsigned low) {
    shim_thread(reinterpret_cast<Body*>((static_cast<unsigned long long>(high) << 32) | low));
}

// getcontext and swapcontext return twice: kept out of shim_launch's loop, whose counters they could clobber.
__attribute__((noinline)) inline void shim_prepare(unsigned i, void (*entry)(), unsigned long long address) {
    ucontext_t& thread = shim_block.threads[i];
    SHIM_UNPOISON(shim_block.stacks[i]);
    getcontext(&thread);
    thread.uc_stack.ss_sp = shim_block.stacks[i].data();
    thread.uc_stack.ss_size = shim_block.stacks[i].size();
    thread.uc_link = nullptr;
    makecontext(&thread, entry, 2, static_cast<unsigned>(address >> 32), static_cast<unsigned>(address & 0xffffffffu));
}

__attribute__((noinline)) inline void shim_run_block() {
    threadIdx.x = shim_block.running = 0;
    swapcontext(&shim_block.launcher, &shim_block.threads[0]);
}

template <typename Body> void shim_launch(unsigned grid, unsigned block, Body body) {
    gridDim.x = grid;
    blockDim.x = block;
    shim_block.threads.assign(block, ucontext_t{});
    for (auto& stack : shim_block.stacks) SHIM_UNPOISON(stack);
    shim_block.stacks.resize(block, std::vector<char>(64 * 1024));
    const unsigned long long address = reinterpret_cast<unsigned long long>(&body);
    for (blockIdx.x = 0; blockIdx.x < grid; ++blockIdx.x) {
        shim_block.finished = 0;
        shim_block.returned.assign(block, false);
        for (unsigned i = 0; i < block; ++i)
            shim_prepare(i, reinterpret_cast<void (*)()>(&shim_trampoline<Body>), address);
        shim_run_block();
    }
}

#define SHIM_LAUNCH(kernel, grid, block, ...) shim_launch((grid), (block), [&]() { kernel(__VA_ARGS__); })
