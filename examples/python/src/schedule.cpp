#include "bindings.hpp"

namespace sluice::python {

void bind_schedule(py::module_& /*module*/) {}

}  // namespace sluice::python
