#include "bindings.hpp"

namespace sluice::python {

void bind_search(py::module_& /*module*/) {}

}  // namespace sluice::python
