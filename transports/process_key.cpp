// process_key.cpp: the per-process nonce behind ProcessKey.
#include "transports/process_key.hpp"

#include <pthread.h>
#include <unistd.h>

#include <random>

namespace quorum {

namespace {

uint64_t draw_nonce() {
  std::random_device rd;
  uint64_t n = 0;
  // Zero is reserved (an all-zero key is never one of a process).
  while (n == 0) n = (uint64_t{rd()} << 32) ^ uint64_t { rd() };
  return n;
}

struct Current {
  ProcessKey key{};
  Current() {
    redraw();
    // A forked child is another process: it gets a key of its own (the
    // handler runs in the child while it has a single thread).
    pthread_atfork(nullptr, nullptr, [] { current().redraw(); });
  }
  void redraw() { key = ProcessKey{static_cast<int64_t>(getpid()), draw_nonce()}; }
  static Current &current() {
    static Current c;
    return c;
  }
};

}  // namespace

ProcessKey ProcessKey::self() {
  return Current::current().key;
}

}  // namespace quorum
