// NumPy .npy and .npz files.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "candle/tensor.h"

namespace candle::npy {

// Reads a .npy file (C or Fortran order; little- or big-endian; dtypes b1/u1/i1/i2/i4/i8/
// u4/f2/f4/f8; bool and int8 become u8 and i16...). Malformed files throw Error(Parse).
Tensor read_npy(const std::string& path, const Device& device);
Tensor read_npy_buffer(const std::vector<std::byte>& data, const Device& device);
// Writes t (C order). Written to a temporary name then renamed.
void write_npy(const Tensor& t, const std::string& path);
std::vector<std::byte> npy_bytes(const Tensor& t);

// Reads all arrays of a .npz (stored or deflate-compressed members), in archive order.
std::vector<std::pair<std::string, Tensor>> read_npz(const std::string& path, const Device& device);
// read_npz() of an archive held in memory.
std::vector<std::pair<std::string, Tensor>> read_npz_buffer(const std::vector<std::byte>& data,
                                                            const Device& device);
// Reads one named array of a .npz ("name" or "name.npy").
Tensor read_npz_by_name(const std::string& path, const std::string& name, const Device& device);
// Writes an uncompressed .npz (numpy.savez layout).
void write_npz(const std::vector<std::pair<std::string, Tensor>>& tensors, const std::string& path);

}  // namespace candle::npy
