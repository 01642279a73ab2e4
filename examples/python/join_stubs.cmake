# cmake -DOUTPUT=<file> -DFRAGMENTS_DIR=<dir> -P join_stubs.cmake: the dir's *.pyi fragments, in name order, as one
# stub file (a directory, not a list, because a list's separators do not survive a build command line).
file(GLOB fragments ${FRAGMENTS_DIR}/*.pyi)
list(SORT fragments)
set(joined "# Generated from examples/python/stubs/*.pyi: edit those.\n")
foreach(fragment IN LISTS fragments)
  file(READ ${fragment} text)
  string(APPEND joined "\n${text}")
endforeach()
file(WRITE ${OUTPUT}.tmp "${joined}")
file(RENAME ${OUTPUT}.tmp ${OUTPUT})
