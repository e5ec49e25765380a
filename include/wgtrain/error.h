// wgtrain's exceptions. Every message names what went wrong and, where it helps, what to do about it.
#pragma once

#include <stdexcept>
#include <string>

namespace wgtrain {

// Base of every error wgtrain throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An argument is wrong: a shape, dtype, dim, index or size that the op cannot take. Thrown before any dispatch.
class ArgumentError : public Error {
 public:
  using Error::Error;
};

// The device rejected work (a validation, out-of-memory or internal error); the message names the op.
class GpuError : public Error {
 public:
  using Error::Error;
};

// The device was lost; nothing more can run on it. Open a new Device.
class DeviceLostError : public GpuError {
 public:
  using GpuError::GpuError;
};

// The backend has no kernel for an op (the native Vulkan backend offers the training ops only); the message names
// the op and the backend that has it.
class UnsupportedError : public Error {
 public:
  using Error::Error;
};

}  // namespace wgtrain
