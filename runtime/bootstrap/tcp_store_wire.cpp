// tcp_store_wire.cpp: the store's wire format (little-endian headers and
// messages), its address parser and its value-size knob, shared by the server
// (tcp_store_server.cpp) and the client (tcp_store_client.cpp).
#include <cstring>

#include "runtime/bootstrap/tcp_store.hpp"

namespace quorum {

Knob<int64_t> knob_store_max_value("QUORUM_STORE_MAX_VALUE", int64_t{64} << 20,
                                   "Largest value in bytes the TCP bootstrap store accepts; a "
                                   "longer message closes the connection");

namespace store_wire {

namespace {
void put_u16(uint8_t *p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
void put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint16_t get_u16(const uint8_t *p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
uint32_t get_u32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t get_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
}  // namespace

void encode_header(const Header &h, uint8_t out[kHeaderBytes]) {
  put_u32(out, h.magic);
  put_u16(out + 4, h.version);
  put_u16(out + 6, h.op);
  put_u32(out + 8, h.key_len);
  put_u32(out + 12, h.value_len);
  put_u64(out + 16, h.arg);
}

Header decode_header(const uint8_t in[kHeaderBytes]) {
  Header h;
  h.magic = get_u32(in);
  h.version = get_u16(in + 4);
  h.op = get_u16(in + 6);
  h.key_len = get_u32(in + 8);
  h.value_len = get_u32(in + 12);
  h.arg = get_u64(in + 16);
  return h;
}

std::vector<uint8_t> encode_message(uint16_t op, const std::string &key, const void *value,
                                    size_t value_len, uint64_t arg) {
  Header h;
  h.op = op;
  h.key_len = static_cast<uint32_t>(key.size());
  h.value_len = static_cast<uint32_t>(value_len);
  h.arg = arg;
  std::vector<uint8_t> msg(kHeaderBytes + key.size() + value_len);
  encode_header(h, msg.data());
  std::memcpy(msg.data() + kHeaderBytes, key.data(), key.size());
  if (value_len > 0) std::memcpy(msg.data() + kHeaderBytes + key.size(), value, value_len);
  return msg;
}

}  // namespace store_wire

bool parse_host_port(const std::string &address, std::string *host, int *port) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) return false;
  std::string h = address.substr(0, colon);
  if (h.front() == '[') {
    if (h.size() < 3 || h.back() != ']') return false;
    h = h.substr(1, h.size() - 2);
  } else if (h.find(':') != std::string::npos) {
    return false;  // a bare IPv6 address needs brackets
  }
  const std::string p = address.substr(colon + 1);
  if (p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos) return false;
  int value = std::stoi(p);
  if (value > 65535) return false;
  *host = h;
  *port = value;
  return true;
}

}  // namespace quorum
