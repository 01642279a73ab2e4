#include "bindings.hpp"

namespace sluice::python {

void bind_proposal(py::module_& /*module*/) {}

}  // namespace sluice::python
