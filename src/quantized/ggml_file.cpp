// Legacy GGML / GGMF / GGJT files (see ggml_file.h): a hostile-input parser over the whole file.
#include "candle/quantized/ggml_file.h"

#include <limits>

#include "io/mmap.h"
#include "quantized/file_reader.h"

namespace candle::quantized::ggml_file {

namespace {

using detail::printable;

constexpr uint32_t kMagicGgml = 0x67676d6c;  // 'ggml'
constexpr uint32_t kMagicGgmf = 0x67676d66;  // 'ggmf'
constexpr uint32_t kMagicGgjt = 0x67676a74;  // 'ggjt'
constexpr size_t kMaxDims = 4;
constexpr uint64_t kGgjtAlignment = 32;

VersionedMagic read_magic(detail::ByteReader& r) {
  if (r.size() < 4) r.fail("too short for a GGML file (" + std::to_string(r.size()) + " bytes)");
  const uint32_t magic = r.u32("the magic");
  if (magic == kMagicGgml) return VersionedMagic::GgmlUnversioned;
  if (magic != kMagicGgmf && magic != kMagicGgjt) {
    if (magic == 0x46554747)  // "GGUF"
      r.fail("a GGUF file, not a legacy GGML one: read it with gguf_file::Content::read");
    char m[4];
    std::memcpy(m, &magic, 4);
    r.fail("not a GGML file (magic '" + printable(std::string_view(m, 4)) + "')");
  }
  const uint32_t version = r.u32("the version");
  if (magic == kMagicGgmf && version == 1) return VersionedMagic::GgmfV1;
  if (magic == kMagicGgjt && version == 1) return VersionedMagic::GgjtV1;
  if (magic == kMagicGgjt && version == 2) return VersionedMagic::GgjtV2;
  if (magic == kMagicGgjt && version == 3) return VersionedMagic::GgjtV3;
  r.fail(std::string("unsupported ") + (magic == kMagicGgmf ? "ggmf" : "ggjt") + " version " +
             std::to_string(version),
         ErrorKind::UnsupportedOp);
}

const char* magic_name(VersionedMagic m) {
  switch (m) {
    case VersionedMagic::GgmlUnversioned: return "unversioned ggml";
    case VersionedMagic::GgmfV1: return "ggmf v1";
    case VersionedMagic::GgjtV1: return "ggjt v1";
    case VersionedMagic::GgjtV2: return "ggjt v2";
    case VersionedMagic::GgjtV3: return "ggjt v3";
  }
  return "?";
}

Content parse(std::span<const uint8_t> file, const std::string& label,
              const std::shared_ptr<const void>& owner, const Device& device) {
  detail::ByteReader r(file, label);
  Content c;
  c.magic = read_magic(r);
  HParams& h = c.hparams;
  for (uint32_t* p : {&h.n_vocab, &h.n_embd, &h.n_mult, &h.n_head, &h.n_layer, &h.n_rot, &h.ftype})
    *p = r.u32("the hyper-parameters");
  const bool scores = c.magic != VersionedMagic::GgmlUnversioned;
  const uint64_t min_token = scores ? 8 : 4;
  if (h.n_vocab > r.remaining() / min_token)
    r.fail("n_vocab " + std::to_string(h.n_vocab) + " is more than the file (" + std::to_string(r.size()) +
           " bytes) could hold");
  c.vocab.token_score_pairs.reserve(h.n_vocab);
  for (uint32_t i = 0; i < h.n_vocab; ++i) {
    const size_t at = r.pos();
    const uint32_t len = r.u32("a token's length");
    if (len > r.remaining())
      r.fail("token " + std::to_string(i) + " at offset " + std::to_string(at) + " has length " +
             std::to_string(len) + ", past the end of the file");
    std::string token(r.bytes(len, "a token"));
    const float score = scores ? r.read<float>("a token's score") : 0.0f;
    c.vocab.token_score_pairs.emplace_back(std::move(token), score);
  }
  const bool aligned = c.magic == VersionedMagic::GgjtV1 || c.magic == VersionedMagic::GgjtV2 ||
                       c.magic == VersionedMagic::GgjtV3;
  while (!r.at_end()) {
    const size_t at = r.pos();
    const uint32_t n_dims = r.u32("a tensor's n_dims");
    const uint32_t name_len = r.u32("a tensor's name length");
    const uint32_t type_id = r.u32("a tensor's type");
    const std::string nth = "the tensor at offset " + std::to_string(at);
    if (n_dims < 1 || n_dims > kMaxDims)
      r.fail(nth + " has " + std::to_string(n_dims) + " dims (1 to " + std::to_string(kMaxDims) + ")");
    uint64_t ne[kMaxDims] = {1, 1, 1, 1};
    uint64_t elems = 1;
    bool overflow = false;
    for (uint32_t d = 0; d < n_dims; ++d) {
      ne[d] = r.u32("a tensor's dims");
      if (ne[d] != 0 && elems > uint64_t(std::numeric_limits<int64_t>::max()) / ne[d]) overflow = true;
      elems *= ne[d];
    }
    if (name_len > r.remaining())
      r.fail(nth + ": the name length " + std::to_string(name_len) + " runs past the end of the file");
    const std::string name(r.bytes(name_len, "a tensor's name"));
    const std::string where = "tensor '" + printable(name) + "'";
    if (overflow) r.fail(where + ": the element count overflows int64");
    const GgmlDType dt = detail::ggml_dtype_of_id(type_id, label + ": " + where);
    if (ggml_is_quantized(dt) && c.magic != VersionedMagic::GgjtV3)
      r.fail(where + ": " + std::string(ggml_dtype_name(dt)) + " blocks of " + magic_name(c.magic) +
                 " files have an older layout; only f32 and f16 tensors of such files are read",
             ErrorKind::UnsupportedOp);
    if (dt == GgmlDType::BF16) r.fail(where + ": bf16 is not a type of legacy GGML files");
    const uint64_t block = ggml_block_size(dt);
    if (ne[0] % block != 0)
      r.fail(where + ": a row of " + std::to_string(ne[0]) + " elements is not a whole number of " +
             std::string(ggml_dtype_name(dt)) + " blocks of " + std::to_string(block));
    if (aligned) {
      const uint64_t pad = (kGgjtAlignment - r.pos() % kGgjtAlignment) % kGgjtAlignment;
      if (pad > r.remaining()) r.fail(where + ": the file ends in the padding before its data");
      r.skip(pad, "padding");
    }
    // elems < 2^63 and type sizes are below 300: the byte count cannot wrap
    const uint64_t nbytes = elems / block * ggml_type_size(dt);
    if (nbytes > r.remaining())
      r.fail(where + ": its " + std::to_string(nbytes) + " bytes at offset " + std::to_string(r.pos()) +
             " run past the end of the file (" + std::to_string(r.size()) + " bytes)");
    const size_t data_at = r.pos();
    r.skip(nbytes, "tensor data");
    std::vector<size_t> shape(n_dims);
    for (uint32_t d = 0; d < n_dims; ++d) shape[n_dims - 1 - d] = static_cast<size_t>(ne[d]);
    if (c.tensors.count(name)) r.fail(where + " appears twice");
    QTensor t = with_context(label + ": loading " + where, [&] {
      return QTensor::from_bytes(owner, file.subspan(data_at, static_cast<size_t>(nbytes)),
                                 Shape(std::move(shape)), dt, device);
    });
    c.tensors.emplace(name, std::move(t));
  }
  return c;
}

}  // namespace

Content Content::read(const std::string& path, const Device& device) {
  auto mapping = io::MmapedFile::open(path);
  std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(mapping->data()), mapping->size());
  return parse(bytes, path, mapping, device);
}

Content Content::read_buffer(std::span<const uint8_t> bytes, const Device& device) {
  auto copy = std::make_shared<std::vector<uint8_t>>(bytes.begin(), bytes.end());
  std::span<const uint8_t> view(copy->data(), copy->size());
  return parse(view, "GGML buffer", copy, device);
}

Content Content::read_buffer(const std::shared_ptr<const void>& owner, std::span<const uint8_t> bytes,
                             const Device& device) {
  return parse(bytes, "GGML buffer", owner, device);
}

}  // namespace candle::quantized::ggml_file
