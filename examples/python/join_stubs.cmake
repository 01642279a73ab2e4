# cmake -DOUTPUT=<file> -DFRAGMENTS=<a.pyi;b.pyi;…> -P join_stubs.cmake: the fragments, in name order, as one stub.
list(SORT FRAGMENTS)
set(joined "# Generated from examples/python/stubs/*.pyi: edit those.\n")
foreach(fragment IN LISTS FRAGMENTS)
  file(READ ${fragment} text)
  string(APPEND joined "\n${text}")
endforeach()
file(WRITE ${OUTPUT}.tmp "${joined}")
file(RENAME ${OUTPUT}.tmp ${OUTPUT})
