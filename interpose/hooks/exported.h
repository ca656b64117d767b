// How a row of hook_table.h becomes an exported C function: its shape names the return type, the
// parameters and the arguments (CMT_SHAPE_x: `result, (params), (args)`), and the wrapper calls the
// row's handler with them. The handlers are templates on the row's enum value, so one definition
// per shape serves every row of that shape. The handler runs with the calling thread held
// (hook_hold.h).
#pragma once

#include "hooks/hook_hold.h"

#define CMT_EXPORTED_WRAPPER(name, handler, result, params, args)        \
  extern "C" __attribute__((visibility("default"))) result name params { \
    return ::cmt::HeldHook<&handler>::call args;                         \
  }
// The shape's three parts arrive as one argument and are spread by this second expansion.
#define CMT_DEFINE_EXPORT(name, handler, ...) CMT_EXPORTED_WRAPPER(name, handler, __VA_ARGS__)

// Rows as enum values, names and per-thread flags, for the family tables.
#define CMT_HOOK_ENUM(name, ...) name,
#define CMT_HOOK_NAME(name, ...) #name,
