# Header-only dependencies of sluice::sluice, all from Debian packages.
include_guard(GLOBAL)
find_package(Eigen3 3.3 REQUIRED NO_MODULE)
find_package(nlohmann_json 3.9 REQUIRED)
find_package(Boost 1.70 REQUIRED)
# Dispatch runs its trials on std::thread.
find_package(Threads REQUIRED)

# CBC is optional: without it sluice::cbc is not defined and the exact MILP paths are unavailable.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(CBC QUIET IMPORTED_TARGET cbc)
endif()
if(CBC_FOUND)
  set(SLUICE_HAVE_CBC ON)
else()
  set(SLUICE_HAVE_CBC OFF)
endif()
