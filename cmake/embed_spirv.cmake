# embed_spirv.cmake — run as `cmake -DSPV=in.spv -DOUT=out.c -DNAME=ident -P`:
# (and -DSRC=name.comp) writes a C file holding the SPIR-V words as `const uint32_t NAME[]` and its
# size in bytes as `const size_t NAME_size`. Two regular-expression passes over the whole hex text
# (linear in its size; a loop of substrings is quadratic and took minutes on the larger shaders).
file(READ "${SPV}" hex HEX)
# the file is little-endian bytes: reverse each group of four into one word
string(REGEX REPLACE "(..)(..)(..)(..)" "0x\\4\\3\\2\\1," body "${hex}")
# eight words a line
string(REGEX REPLACE "((0x[0-9a-f]+,)(0x[0-9a-f]+,)(0x[0-9a-f]+,)(0x[0-9a-f]+,)(0x[0-9a-f]+,)(0x[0-9a-f]+,)(0x[0-9a-f]+,)(0x[0-9a-f]+,))" "\\1\n" body "${body}")
file(WRITE "${OUT}" "/* generated from ${SRC} by cmake/embed_spirv.cmake */\n#include <stddef.h>\n#include <stdint.h>\nconst uint32_t ${NAME}[] = {\n${body}};\nconst size_t ${NAME}_size = sizeof ${NAME};\n")
