// The umbrella header of candle-cpp's core.
#pragma once

#include "candle/backprop.h"
#include "candle/comm.h"
#include "candle/device.h"
#include "candle/display.h"
#include "candle/dtype.h"
#include "candle/error.h"
#include "candle/graph.h"
#include "candle/io/npy.h"
#include "candle/io/pickle.h"
#include "candle/io/safetensors.h"
#include "candle/layout.h"
#include "candle/shape.h"
#include "candle/tensor.h"
#include "candle/utils.h"
#include "candle/var.h"
