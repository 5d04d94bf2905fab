// Optional cuDNN convolutions: libcudnn.so.9 is opened at run time (never linked); where it is
// missing, or turned off (CANDLE_CUDA_CUDNN=0, cuda::set_cudnn_enabled(false)), or a case is
// outside what is handled here, the callers run the backend's own kernels.
#pragma once

#include <string>

#include "storage.h"

namespace candle::cuda_backend {

// Whether cuDNN is on and loaded (why not, in `why`).
bool cudnn_available(std::string* why = nullptr);

// out (dense [b, c_out, out_h, out_w], allocated by the caller) = conv2d(x, w) without bias, through
// cuDNN. False (nothing queued) when cuDNN is not there or the case is not handled.
bool cudnn_conv2d(const CudaStorage& x, const Layout& xl, const CudaStorage& w, const Layout& wl,
                  const ParamsConv2D& p, CudaStorage& out);

// The gradients of conv2d through cuDNN (deterministic algorithms only): dx [b, c_in, i_h, i_w] from
// grad_out g and the kernel; dw [c_out, c_in / groups, k_h, k_w] from the input x and g. Outputs
// dense, allocated by the caller; false (nothing queued) as above.
bool cudnn_conv2d_grad_input(const CudaStorage& g, const Layout& gl, const CudaStorage& w, const Layout& wl,
                             const ParamsConv2D& p, CudaStorage& dx);
bool cudnn_conv2d_grad_kernel(const CudaStorage& x, const Layout& xl, const CudaStorage& g, const Layout& gl,
                              const ParamsConv2D& p, CudaStorage& dw);

}  // namespace candle::cuda_backend
