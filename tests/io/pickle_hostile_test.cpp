// Hostile pickles and checkpoints (tools/make-hostile-pickles.py, committed under
// tests/fuzz/corpus/): each gets a short, clear candle::Error; nothing is executed, nothing
// recurses on the input's depth, nothing allocates more than the input could hold.
#include <gtest/gtest.h>

#include "candle/candle.h"
#include "candle/io/pickle.h"
#include "hostile_util.h"
#include "io/io_test_util.h"
#include "io/pickle_vm.h"

namespace {

using namespace candle;
namespace pd = candle::pickle::detail;

std::string corpus(const std::string& dir, const std::string& name) {
  return std::string(CANDLE_TEST_DATA_DIR) + "/../fuzz/corpus/" + dir + "/" + name;
}

// Runs a raw pickle through the VM and the tensor walk, as fuzz_pickle does.
void run_pickle(const std::vector<std::byte>& bytes) {
  pd::Tree t = pd::unpickle(bytes, pd::PidFormat::Zip, "test pickle");
  (void)pd::collect_tensors(t, t.root, "test pickle");
}

void run_pickle_file(const std::string& name) { run_pickle(io_test::read_bytes(corpus("pickle", name))); }

#define EXPECT_PICKLE_ERROR(file, part) \
  EXPECT_HOSTILE_ERROR([] { run_pickle_file(file); }, ErrorKind::Parse, part)

TEST(HostilePickle, GlobalsOutsideTheAllowListAreRejected) {
  EXPECT_PICKLE_ERROR("hostile_os_system.pkl", "pickle: global 'os.system' is not allowed");
  EXPECT_PICKLE_ERROR("hostile_stack_global_eval.pkl", "global 'builtins.eval' is not allowed");
}

TEST(HostilePickle, ReduceOfSomethingNotCallable) {
  EXPECT_PICKLE_ERROR("hostile_reduce_str.pkl", "cannot call a str");
  EXPECT_PICKLE_ERROR("hostile_reduce_storage_type.pkl", "cannot call a storage type 'torch.FloatStorage'");
  EXPECT_PICKLE_ERROR("hostile_codecs_rot13.pkl", "encoding 'rot13' is not supported");
  EXPECT_PICKLE_ERROR("hostile_build_on_list.pkl", "BUILD of a list is not supported");
}

TEST(HostilePickle, MemoAndStack) {
  EXPECT_PICKLE_ERROR("hostile_memo_out_of_range.pkl", "memo index 5 is not defined");
  EXPECT_PICKLE_ERROR("hostile_stack_underflow.pkl", "stack underflow");
  EXPECT_PICKLE_ERROR("hostile_pop_mark_without_mark.pkl", "no MARK to pop to");
}

TEST(HostilePickle, LengthsBeyondTheInput) {
  EXPECT_PICKLE_ERROR("hostile_huge_length.pkl", "truncated: 4294967295 bytes needed, 3 left");
  EXPECT_PICKLE_ERROR("hostile_huge_length8.pkl", "truncated: 9223372036854775807 bytes needed");
  EXPECT_PICKLE_ERROR("hostile_frame_past_end.pkl", "runs past the end");
  EXPECT_PICKLE_ERROR("hostile_negative_long4.pkl", "negative length");
  EXPECT_PICKLE_ERROR("hostile_no_stop.pkl", "ends without a STOP opcode");
}

TEST(HostilePickle, BadOpcodesAndProtocols) {
  EXPECT_PICKLE_ERROR("hostile_unknown_opcode.pkl", "unknown opcode 0xff");
  EXPECT_PICKLE_ERROR("hostile_ext_code.pkl", "extension registry codes");
  EXPECT_PICKLE_ERROR("hostile_bad_protocol.pkl", "unsupported pickle protocol 9");
  EXPECT_PICKLE_ERROR("hostile_big_text_int.pkl", "more than 1000 digits");
}

TEST(HostilePickle, DeepNesting) {
  EXPECT_PICKLE_ERROR("hostile_deep_marks.pkl", "MARKs nest deeper than 10000");
  EXPECT_PICKLE_ERROR("hostile_deep_lists.pkl", "nests deeper than 64 levels");
  EXPECT_PICKLE_ERROR("hostile_cyclic_list.pkl", "or is cyclic");
  // 100k nested lists: built without recursion, walked to depth 64, freed flat
  std::string s = "\x80\x02" + std::string(100000, ']') + std::string(99999, 'a') + ".";
  EXPECT_HOSTILE_ERROR([&] { run_pickle(io_test::to_bytes(s)); }, ErrorKind::Parse,
                       "nests deeper than 64 levels");
  // 100k nested dicts under keys: the same
  std::string d = "\x80\x02";
  for (int i = 0; i < 100000; ++i) d.append("}X\x01\x00\x00\x00k", 7);
  d.append(1, 'N');
  for (int i = 0; i < 100000; ++i) d += "s";
  d += ".";
  EXPECT_HOSTILE_ERROR([&] { run_pickle(io_test::to_bytes(d)); }, ErrorKind::Parse,
                       "nests deeper than 64 levels");
}

TEST(HostilePickle, SharedContainersDoNotMultiplyTheWork) {
  // 40 levels of dicts that each hold the level below twice: 2^40 paths to one tensor
  EXPECT_PICKLE_ERROR("hostile_billion_laughs.pkl", "the same tensors more than");
}

TEST(HostilePickle, TensorsOutsideTheirStorage) {
  EXPECT_PICKLE_ERROR(
      "hostile_tensor_past_storage.pkl",
      "a tensor of size [10], stride [1] and offset 0 reaches past its storage '0' of 4 float32");
  EXPECT_PICKLE_ERROR("hostile_tensor_offset_past_storage.pkl", "offset 3 reaches past its storage");
  EXPECT_PICKLE_ERROR("hostile_tensor_extent_overflow.pkl", "reaches past its storage");
  EXPECT_PICKLE_ERROR("hostile_tensor_count_overflow.pkl", "element count of a tensor overflows");
  EXPECT_PICKLE_ERROR("hostile_tensor_negative_size.pkl", "the size of a tensor is negative (-1)");
  EXPECT_PICKLE_ERROR("hostile_storage_two_dtypes.pkl",
                      "storage '0' is referenced as 4 float32 and as 4 int64");
}

TEST(HostilePickle, TheSeedsOfTheFixturesLoad) {
  EXPECT_NO_THROW(run_pickle_file("seed_module.pkl"));
  EXPECT_NO_THROW(run_pickle_file("seed_nested_proto4.pkl"));
  EXPECT_NO_THROW(run_pickle_file("seed_views_proto5.pkl"));
}

void open_pth(const std::string& name) {
  pickle::PthTensors p(corpus("pth", name));
  for (const auto& info : p.tensor_infos()) (void)p.load(info.name);
}

#define EXPECT_PTH_ERROR(file, kind, part) EXPECT_HOSTILE_ERROR([] { open_pth(file); }, kind, part)

TEST(HostilePth, Storages) {
  EXPECT_PTH_ERROR("hostile_missing_storage.pt", ErrorKind::Parse,
                   "storage '0' is missing (no member 'archive/data/0')");
  EXPECT_PTH_ERROR("hostile_short_storage.pt", ErrorKind::Parse,
                   "storage '0' holds 8 bytes, 4 float32 elements need 16");
  EXPECT_PTH_ERROR("hostile_tensor_past_storage.pt", ErrorKind::Parse, "reaches past its storage '0'");
  EXPECT_PTH_ERROR("hostile_complex.pt", ErrorKind::UnsupportedOp, "torch dtype complex64");
  EXPECT_PTH_ERROR("hostile_expand_huge.pt", ErrorKind::UnsupportedOp,
                   "expanding it would take more than 64 MiB");
}

TEST(HostilePth, ArchiveAndPickle) {
  EXPECT_PTH_ERROR("hostile_os_system.pt", ErrorKind::Parse, "global 'os.system' is not allowed");
  EXPECT_PTH_ERROR("hostile_no_data_pkl.pt", ErrorKind::Parse, "no <folder>/data.pkl");
  EXPECT_PTH_ERROR("hostile_truncated_zip.pt", ErrorKind::Parse, "no end of central directory");
}

TEST(HostilePth, Legacy) {
  EXPECT_PTH_ERROR("hostile_legacy_truncated.pt", ErrorKind::Parse,
                   "truncated: storage '0' needs 16 bytes, 11 left");
  EXPECT_PTH_ERROR("hostile_legacy_wrong_numel.pt", ErrorKind::Parse,
                   "storage '0' has 3 elements in the file, 4 in the pickle");
  EXPECT_PTH_ERROR("hostile_legacy_missing_storage.pt", ErrorKind::Parse, "storage '0' has no data");
  EXPECT_PTH_ERROR("hostile_legacy_bad_magic.pt", ErrorKind::Parse, "magic number is missing");
  EXPECT_PTH_ERROR("hostile_legacy_view_outside.pt", ErrorKind::Parse,
                   "storage view 'v' of 4 elements at 2 lies outside its storage of 4");
}

TEST(HostilePth, EveryTruncationOfAFixtureIsAnError) {
  for (const char* name : {"module", "module_legacy", "views_legacy"}) {
    auto bytes = io_test::read_bytes(std::string(CANDLE_TEST_DATA_DIR) + "/pth/" + name + ".pt");
    for (size_t n = 0; n < bytes.size(); n += 7) {
      std::vector<std::byte> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
      const auto t = hostile::thrown([&] {
        auto p = pickle::PthTensors::from_buffer(cut);
        for (const auto& info : p.tensor_infos()) (void)p.load(info.name);
      });
      ASSERT_TRUE(t.kind.has_value()) << name << " cut at " << n << " loaded";
      EXPECT_EQ(*t.kind, ErrorKind::Parse) << t.message;
    }
  }
}

}  // namespace
