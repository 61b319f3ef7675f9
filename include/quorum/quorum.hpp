// quorum.hpp: C++ RAII wrapper over the C API (quorum.h).
#pragma once
#include "quorum/quorum.h"
