# embed_spirv.cmake — run as `cmake -DSPV=in.spv -DOUT=out.c -DNAME=ident -P`:
# (and -DSRC=name.comp) writes a C file holding the SPIR-V words as `const uint32_t NAME[]` and its
# size in bytes as `const size_t NAME_size`.
file(READ "${SPV}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR words "${n} / 8")
set(body "")
set(i 0)
while(i LESS n)
  string(SUBSTRING "${hex}" ${i} 8 w)
  # the file is little-endian bytes: reverse them into one word
  string(SUBSTRING "${w}" 0 2 b0)
  string(SUBSTRING "${w}" 2 2 b1)
  string(SUBSTRING "${w}" 4 2 b2)
  string(SUBSTRING "${w}" 6 2 b3)
  string(APPEND body "0x${b3}${b2}${b1}${b0},")
  math(EXPR i "${i} + 8")
  math(EXPR r "${i} % 64")
  if(r EQUAL 0)
    string(APPEND body "\n")
  endif()
endwhile()
file(WRITE "${OUT}" "/* generated from ${SRC} by cmake/embed_spirv.cmake */\n#include <stddef.h>\n#include <stdint.h>\nconst uint32_t ${NAME}[] = {\n${body}};\nconst size_t ${NAME}_size = sizeof ${NAME};\n")
