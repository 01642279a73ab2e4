#include "bindings.hpp"

namespace sluice::python {

void bind_compare(py::module_& /*module*/) {}

}  // namespace sluice::python
