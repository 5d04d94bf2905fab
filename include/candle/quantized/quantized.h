// candle::quantized (candle's candle_core::quantized): QTensor, a tensor of GGML blocks, and
// QMatMul, a matrix multiplication by one. Quantized data is not a DType: a block of 32 or 256
// weights shares its scales. Shapes are candle's (row-major, the last dim contiguous), the
// reverse of GGUF's ne[] order; the last dim must be a whole number of blocks.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <variant>
#include <vector>

#include "candle/device.h"
#include "candle/quantized/ggml_dtype.h"
#include "candle/shape.h"
#include "candle/tensor.h"

namespace candle::quantized {

class QTensor {
 public:
  // Blocks already in memory: `owner` keeps `bytes` alive (a memory-mapped file, a vector);
  // nothing is copied on the CPU. On another device whose backend has kernels for the type, the
  // blocks are also uploaded, once, to a U8 tensor there (device_data()), which those kernels
  // read; the host view stays. Throws when bytes.size() is not what shape and dtype need.
  static QTensor from_bytes(std::shared_ptr<const void> owner, std::span<const uint8_t> bytes, Shape shape,
                            GgmlDType dtype, const Device& device = Device::cpu());
  // candle's QTensor::quantize: a float tensor (any float dtype; its last dim a multiple of the
  // block size) to blocks of `dtype`; imatrix: optional importance weights, one per column.
  static QTensor quantize(const Tensor& t, GgmlDType dtype);
  static QTensor quantize_imatrix(const Tensor& t, std::span<const float> imatrix, GgmlDType dtype);
  // The rows of 2-d QTensors of one dtype, row length and device stacked in order (a fused q/k/v
  // projection). Where every part's blocks are on a device, they are concatenated there and the
  // result has no host copy (data() is empty; dequantize reads the device blocks); otherwise the
  // host blocks are copied into an owned buffer.
  static QTensor cat_rows(std::span<const QTensor* const> parts);

  // f32 / f16 values on `device`: by that device's kernel when the blocks are there (and it has
  // one), else on the host and uploaded.
  Tensor dequantize(const Device& device) const;
  Tensor dequantize_f16(const Device& device) const;
  // the raw blocks
  // Sub-tensors along the first dim (rank >= 2), their blocks on `device`: rows start..start+len
  // (the same rank), or the i-th one without that dim (an MoE layer's experts stored as one
  // [experts, n, k] tensor). On the CPU a view of these bytes; elsewhere those rows uploaded.
  QTensor narrow(size_t start, size_t len, const Device& device) const;
  QTensor get(size_t i, const Device& device) const;
  // Rows of a 2-d QTensor (a token embedding table kept in its blocks) picked by `ids` (u32 or i64, any
  // shape, on the CPU), dequantized to f32: ids.shape() + [k], on `device`. An id past the rows is
  // Error(IndexOutOfRange) naming it.
  Tensor embedding(const Tensor& ids, const Device& device) const;
  // Columns start..start+len of a 2-d QTensor (a row-parallel weight's share), whole blocks: start and
  // len multiples of the type's block size, else Error(InvalidArgument). The rows' parts are copied.
  QTensor narrow_cols(size_t start, size_t len, const Device& device) const;
  std::span<const uint8_t> data() const { return bytes_; }
  GgmlDType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  const Device& device() const { return device_; }
  size_t storage_size_in_bytes() const {
    return bytes_.empty() && device_blocks_.defined() ? device_blocks_.elem_count() : bytes_.size();
  }
  // The blocks as a 1-D U8 tensor on device() (undefined on the CPU and on devices without
  // kernels for the type, where data() is read).
  const Tensor& device_data() const { return device_blocks_; }

 private:
  QTensor(std::shared_ptr<const void> owner, std::span<const uint8_t> bytes, Shape shape, GgmlDType dtype,
          Device device);
  // the blocks in host memory (a copy from the device when there are no host bytes)
  std::vector<uint8_t> host_bytes() const;
  std::shared_ptr<const void> owner_;
  std::span<const uint8_t> bytes_;
  Shape shape_;
  GgmlDType dtype_;
  Device device_;
  Tensor device_blocks_;
};

// x @ w^T for a weight w of shape (n, k): x (..., k) -> (..., n). A QTensor of a block type runs
// the quantized kernels of its device (x must be on the same device); f16 / bf16 weights on the
// CPU or on a GPU with kernels for them multiply in their own type (no gradient: inference), f32
// ones and the rest are dequantized once at construction and multiply as plain tensors (candle's
// QMatMul::Tensor).
class QMatMul {
 public:
  static QMatMul from_qtensor(const QTensor& w);
  static QMatMul from_arc(std::shared_ptr<const QTensor> w);
  // from_arc, and on the CPU the blocks also copied once into the interleaved layout of the SIMD
  // kernels where there is one (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS
  // with a multiple of 16 rows, on AVX2 and up; 1.2-3.0x faster than the plain blocks for 512 activation
  // rows, 1.7-3.4x for one (Q5_K's from DRAM about even), at 2 threads on Zen 4, qmatmul_vs_ggml --packed
  // 0|1): forward() then reads only the copy, so a caller whose weight lies in a mapped file may drop those
  // pages (the GGUF loaders do). `packed`, when given, is called with each part of the blocks (a few MiB, in
  // order) as soon as it is copied, so that a large weight's pages can go while it is packed (the loaders
  // pass gguf_file::Content::release). CANDLE_QMM_REPACK=0 turns it off.
  static QMatMul from_arc_repacked(std::shared_ptr<const QTensor> w,
                                   const std::function<void(const void*, size_t)>& packed = {});
  // whether forward() reads a repacked copy of the blocks
  bool repacked() const { return packed_ != nullptr; }
  // Several weights (n_i, k) of one input side by side, as one (sum n_i, k) weight: forward(x) is
  // the concatenation along the last dim of each part's forward(x), the same bits. On the CPU, parts
  // of block types of one block size (Q4_K_M's Q4_K q / k and Q6_K v) share one quantization of x and
  // one pass over the threads (a decoder's q / k / v or gate / up: the parts stay where they are, no
  // stacked copy); elsewhere they multiply in turn.
  // Error(ShapeMismatch) without parts or for parts of different k.
  static QMatMul group(std::vector<QMatMul> parts);
  // a group's parts (empty for one weight)
  const std::vector<QMatMul>& parts() const;
  // the weight's blocks when it is held as a QTensor (a block type, or f16 / bf16 on a GPU), else
  // nullptr (it was dequantized to a plain tensor: weight(); or it is a group: parts())
  const QTensor* qtensor() const;
  // the dequantized weight of a QMatMul that holds no QTensor, else an undefined tensor
  Tensor weight() const;
  Tensor forward(const Tensor& x) const;
  // the weight's dtype as stored (a group's: its parts' when they agree, else F32)
  GgmlDType dtype() const;
  // held as a QTensor (a group: every part is)
  bool is_quantized() const;

 private:
  Tensor forward_group(const Tensor& x) const;
  std::variant<std::shared_ptr<const QTensor>, Tensor> w_;
  std::shared_ptr<const uint8_t> packed_;              // from_arc_repacked's copy, or null
  std::shared_ptr<const std::vector<QMatMul>> parts_;  // group()'s parts, or null
};

}  // namespace candle::quantized
