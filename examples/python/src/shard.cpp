#include "bindings.hpp"

namespace sluice::python {

void bind_shard(py::module_& /*module*/) {}

}  // namespace sluice::python
