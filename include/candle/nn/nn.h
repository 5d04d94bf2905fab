// candle::nn: candle-nn's layers, ops, variable builders and maps.
#pragma once

#include "candle/nn/attention.h"
#include "candle/nn/encoding.h"
#include "candle/nn/init.h"
#include "candle/nn/kv_cache.h"
#include "candle/nn/layers.h"
#include "candle/nn/loss.h"
#include "candle/nn/module.h"
#include "candle/nn/ops.h"
#include "candle/nn/optim.h"
#include "candle/nn/rotary_emb.h"
#include "candle/nn/var_builder.h"
#include "candle/nn/var_map.h"
