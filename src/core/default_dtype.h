// A scoped change of LibTorch's default dtype (the dtype of tensors created without one, e.g. the parameters
// torch::nn modules allocate in their constructors).
#pragma once
#include <ATen/ATen.h>

namespace vispco {

/// Sets at::get_default_dtype() to `t` for its lifetime and restores the previous one on destruction (also
/// when an exception unwinds). The default dtype is process-global: use it only where no other thread creates
/// tensors meanwhile (model construction before serving starts).
struct DefaultDtypeGuard {
  caffe2::TypeMeta saved = at::get_default_dtype();
  explicit DefaultDtypeGuard(c10::ScalarType t) { at::set_default_dtype(c10::scalarTypeToTypeMeta(t)); }
  ~DefaultDtypeGuard() { at::set_default_dtype(saved); }
  DefaultDtypeGuard(const DefaultDtypeGuard&) = delete;
  DefaultDtypeGuard& operator=(const DefaultDtypeGuard&) = delete;
};

}  // namespace vispco
