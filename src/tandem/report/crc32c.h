// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), table-driven, and the masked form the
// TFRecord framing of TensorBoard event files uses. Debian 12 packages no C/C++ CRC-32C library.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tandem::report {

// The CRC-32C of `size` bytes, continuing from `crc` (the CRC of the bytes before; 0 to start).
std::uint32_t crc32c(const void* data, std::size_t size, std::uint32_t crc = 0);

// ((crc >> 15) | (crc << 17)) + 0xa282ead8: what TFRecord stores, so data that embeds its own
// CRC does not check against itself.
std::uint32_t masked_crc32c(const void* data, std::size_t size);

}  // namespace tandem::report
