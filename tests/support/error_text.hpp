// The what() of the exception `f` throws, or "" when it throws none: lets a
// test match an error's text.
#pragma once

#include <exception>
#include <functional>
#include <string>

namespace kiln::test {

inline std::string errorOf(const std::function<void()>& f) {
    try {
        f();
    } catch (const std::exception& e) {
        return e.what();
    }
    return "";
}

}  // namespace kiln::test
