// dlpack_view.hpp: a Buffer from an object's __dlpack__ (buffers.hpp).
#pragma once

#include "buffers.hpp"

namespace quorum_py {

// True if obj offers __dlpack__ and __dlpack_device__.
bool has_dlpack(const py::object &obj);
// Consumes obj.__dlpack__() into *out. False, with *out untouched, when the
// producer refused to export obj and obj has the buffer protocol (numpy: a
// read-only, bool or byte-swapped array), for the caller to view it that way;
// any other refusal fails with QUORUM_ERR_INVALID_ARG naming what and the
// producer's reason. DLPack (before 1.0) has no read-only flag: producers
// refuse to export read-only memory, so whatever is exported may be written.
bool dlpack_view(const py::object &obj, const char *what, Buffer *out);

}  // namespace quorum_py
