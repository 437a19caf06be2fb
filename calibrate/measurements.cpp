#include "calibrate/measurements.hpp"

#include "sim/hardware/collective_model.hpp"

namespace stepsim::calib {

double algbw_gbps(Bytes bytes, Time time) {
  return time.ns > 0 ? static_cast<double>(bytes.count) / static_cast<double>(time.ns) : 0.0;  // B/ns == GB/s
}

double busbw_gbps(CollectiveKind kind, int ranks, Bytes bytes, Time time) {
  return algbw_gbps(bytes, time) * busbw_factor(kind, ranks);
}

}  // namespace stepsim::calib
