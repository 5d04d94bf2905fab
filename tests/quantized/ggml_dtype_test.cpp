#include "candle/quantized/ggml_dtype.h"

#include <gtest/gtest.h>

#include "candle/error.h"

using namespace candle::quantized;

TEST(GgmlDType, SizesAreGgmls) {
  EXPECT_EQ(ggml_block_size(GgmlDType::Q4_0), 32u);
  EXPECT_EQ(ggml_type_size(GgmlDType::Q4_0), 18u);
  EXPECT_EQ(ggml_type_size(GgmlDType::Q4K), 144u);
  EXPECT_EQ(ggml_type_size(GgmlDType::Q6K), 210u);
  EXPECT_EQ(ggml_type_size(GgmlDType::IQ4_XS), 136u);
  EXPECT_EQ(ggml_type_size(GgmlDType::BF16), 2u);
  EXPECT_EQ(ggml_row_bytes(GgmlDType::Q8_0, 4096), 4096u / 32 * 34);
}

TEST(GgmlDType, IdsAndNamesRoundTrip) {
  for (GgmlDType t : kAllGgmlDTypes) {
    EXPECT_EQ(ggml_dtype_from_id(static_cast<uint32_t>(t)), t);
    EXPECT_EQ(ggml_dtype_from_name(ggml_dtype_name(t)), t);
  }
  EXPECT_EQ(ggml_dtype_from_id(4), std::nullopt);   // Q4_2, removed from ggml
  EXPECT_EQ(ggml_dtype_from_id(16), std::nullopt);  // IQ2_XXS: not supported here
  EXPECT_EQ(ggml_dtype_from_name("Q4_K"), GgmlDType::Q4K);
}

TEST(GgmlDType, RowNotAWholeNumberOfBlocksIsAnError) {
  EXPECT_THROW(ggml_row_bytes(GgmlDType::Q4K, 4000), candle::Error);
}
