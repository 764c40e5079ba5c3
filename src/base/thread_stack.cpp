#include "kiln/base/thread_stack.hpp"

#include <cxxabi.h>
#include <execinfo.h>
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

namespace kiln::base {
namespace {

constexpr int kCapacity = 64;
void* frames[kCapacity];
std::atomic<int> depth{-1};  // -1 while a capture is awaited
std::atomic<bool> targetKnown{false};
std::atomic<pthread_t> target{};  // written at every step by the training thread, read by the pump
std::once_flag handlerInstalled;

// Only backtrace() here: it is safe in a handler once its library is loaded (markStackTarget loads it).
extern "C" void captureStack(int) {
    const int saved = errno;
    depth.store(backtrace(frames, kCapacity));
    errno = saved;
}

// "libfoo.so(_ZN4kiln3fooEv+0x12) [0x...]" -> "kiln::foo() (libfoo.so)".
std::string readable(const char* symbol) {
    std::string line(symbol);
    const auto open = line.find('('), plus = line.find('+', open == std::string::npos ? 0 : open);
    std::string library = line.substr(0, open);
    if (const auto slash = library.rfind('/'); slash != std::string::npos) library = library.substr(slash + 1);
    if (open == std::string::npos || plus == std::string::npos || plus == open + 1) return "?? (" + library + ")";
    const std::string mangled = line.substr(open + 1, plus - open - 1);
    int status = 0;
    const std::unique_ptr<char, decltype(&std::free)> demangled(
        abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status), &std::free);
    std::string name = status == 0 && demangled ? demangled.get() : mangled;
    constexpr std::size_t kLongest = 160;  // template arguments make names of thousands of characters
    if (name.size() > kLongest) name = name.substr(0, kLongest) + "...";
    return name + " (" + library + ")";
}

}  // namespace

void markStackTarget() {
    std::call_once(handlerInstalled, [] {
        void* warm[1];
        backtrace(warm, 1);  // loads the unwinder now, not inside the handler
        struct sigaction action {};
        action.sa_handler = captureStack;
        sigemptyset(&action.sa_mask);
        action.sa_flags = SA_RESTART;
        sigaction(SIGURG, &action, nullptr);
    });
    target.store(pthread_self());
    targetKnown = true;
}

bool stackTargetKnown() { return targetKnown.load(); }

std::vector<std::string> stackOfTarget(double waitSeconds, int maxFrames) {
    std::vector<std::string> lines;
    if (!targetKnown.load()) return lines;
    depth = -1;
    if (pthread_kill(target.load(), SIGURG) != 0) return lines;
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(waitSeconds);
    while (depth.load() < 0 && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const int n = depth.load();
    if (n <= 0) return lines;
    const std::unique_ptr<char*, decltype(&std::free)> symbols(backtrace_symbols(frames, n), &std::free);
    if (!symbols) return lines;
    // Frame 0 is the handler, frame 1 the kernel's return into it.
    for (int i = 2; i < n && static_cast<int>(lines.size()) < maxFrames; ++i) lines.push_back(readable(symbols.get()[i]));
    return lines;
}

}  // namespace kiln::base
