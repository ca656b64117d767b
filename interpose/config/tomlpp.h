// toml++ as cmt uses it: header-only, errors as values (TOML_EXCEPTIONS=0, set by CMake), and its
// internal assertions off in every build type. toml++ 3.3 asserts on some malformed input (a
// table header such as "[#cmt]"); in a debug build that would abort the host process over a bad
// profile, where cmt must warn and carry on. Include this, never <toml++/toml.h> directly.
#pragma once

#ifndef TOML_ASSERT
#define TOML_ASSERT(expr) static_cast<void>(0)
#endif
#include <toml++/toml.h>
