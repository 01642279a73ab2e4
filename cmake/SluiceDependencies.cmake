# Dependencies, all from Debian packages. The planners (sluice::sluice) need only Threads: dispatch runs
# its trials on std::thread. Eigen (sluice::fit) and nlohmann-json (sluice::io) are required when sluice
# builds its own programs, which use both, and optional otherwise, so that a project that adds sluice as a
# subdirectory and only plans needs neither installed.
include_guard(GLOBAL)
find_package(Threads REQUIRED)
if(SLUICE_BUILD_TESTS OR SLUICE_BUILD_BENCH OR SLUICE_BUILD_EXAMPLES OR SLUICE_BUILD_EXECUTOR)
  set(sluice_component_dependency REQUIRED)
else()
  set(sluice_component_dependency QUIET)
endif()
find_package(Eigen3 3.3 ${sluice_component_dependency} NO_MODULE)
find_package(nlohmann_json 3.9 ${sluice_component_dependency})

# CBC is optional: without it sluice::cbc is not defined and the exact MILP paths are unavailable.
# SLUICE_USE_CBC=OFF builds as if it were absent, to check that configuration where CBC is installed.
option(SLUICE_USE_CBC "Use CBC when pkg-config finds it" ON)
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND AND SLUICE_USE_CBC)
  pkg_check_modules(CBC QUIET IMPORTED_TARGET cbc)
endif()
if(SLUICE_USE_CBC AND CBC_FOUND)
  set(SLUICE_HAVE_CBC ON)
else()
  set(SLUICE_HAVE_CBC OFF)
endif()
