// candle-nn's tests/one_hot.rs.
#include "nn_test_util.h"

using namespace candle;
using nn::encoding::one_hot;

TEST(NnOneHot, I64OneHot) {
  Tensor ids = Tensor::new_<int64_t>({{0, 2}, {1, -1}}, Device::cpu());
  Tensor t = one_hot(ids, 4, 1.0f, 0.0f);
  EXPECT_EQ(t.dims(), (std::vector<size_t>{2, 2, 4}));
  EXPECT_EQ(t.dtype(), DType::F32);
  EXPECT_EQ(t.to_vec3<float>(), (std::vector<std::vector<std::vector<float>>>{{{1, 0, 0, 0}, {0, 0, 1, 0}},
                                                                              {{0, 1, 0, 0}, {0, 0, 0, 0}}}));
}

TEST(NnOneHot, Rank3OneHot) {
  Tensor ids = Tensor::new_<int64_t>({{{0, 1}, {2, 3}}, {{3, 1}, {1, -1}}}, Device::cpu());
  Tensor t = one_hot(ids, 4, 1.0f, 0.0f);
  EXPECT_EQ(t.dims(), (std::vector<size_t>{2, 2, 2, 4}));
  EXPECT_EQ(t.get(1).to_vec3<float>(), (std::vector<std::vector<std::vector<float>>>{
                                           {{0, 0, 0, 1}, {0, 1, 0, 0}}, {{0, 1, 0, 0}, {0, 0, 0, 0}}}));
  EXPECT_EQ(t.get(0).to_vec3<float>(), (std::vector<std::vector<std::vector<float>>>{
                                           {{1, 0, 0, 0}, {0, 1, 0, 0}}, {{0, 0, 1, 0}, {0, 0, 0, 1}}}));
}

TEST(NnOneHot, U8OneCold) {
  Tensor ids = Tensor::new_<int64_t>({{0, 2}, {1, -1}}, Device::cpu());
  Tensor t = one_hot(ids, 4, uint8_t{0}, uint8_t{1});
  EXPECT_EQ(t.dtype(), DType::U8);
  EXPECT_EQ(t.to_vec3<uint8_t>(), (std::vector<std::vector<std::vector<uint8_t>>>{
                                      {{0, 1, 1, 1}, {1, 1, 0, 1}}, {{1, 0, 1, 1}, {1, 1, 1, 1}}}));
}

TEST(NnOneHot, U32IndicesAndBadIndices) {
  Tensor ids = Tensor::new_<uint32_t>({3u, 0u}, Device::cpu());
  EXPECT_EQ(one_hot(ids, 4, 2.0, -1.0).to_vec2<double>(),
            (std::vector<std::vector<double>>{{-1, -1, -1, 2}, {2, -1, -1, -1}}));
  EXPECT_THROW(one_hot(Tensor::new_<int64_t>({4}, Device::cpu()), 4, 1.0f, 0.0f), Error);
  EXPECT_THROW(one_hot(Tensor::new_<int64_t>({-2}, Device::cpu()), 4, 1.0f, 0.0f), Error);
  EXPECT_THROW(one_hot(Tensor::new_<float>({1.f}, Device::cpu()), 4, 1.0f, 0.0f), Error);
}
