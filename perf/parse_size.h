/* parse_size.h: "8", "64K", "16M", "1G" -> bytes (0 when malformed), the size
 * syntax quorum-bench takes, for the anchor benchmarks in C. */
#ifndef QUORUM_PERF_PARSE_SIZE_H
#define QUORUM_PERF_PARSE_SIZE_H

#include <stddef.h>
#include <stdlib.h>

static inline size_t parse_size(const char *text) {
  char *end = NULL;
  unsigned long long v = strtoull(text, &end, 10);
  if (end == text) return 0;
  switch (*end) {
    case 'k':
    case 'K':
      v <<= 10;
      break;
    case 'm':
    case 'M':
      v <<= 20;
      break;
    case 'g':
    case 'G':
      v <<= 30;
      break;
    case '\0':
      break;
    default:
      return 0;
  }
  return (size_t)v;
}

#endif
