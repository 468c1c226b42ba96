# aarch64-linux-gnu.cmake — cross-build cmf for 64-bit Arm Linux with
# Debian's gcc-aarch64-linux-gnu and the arm64 (multiarch) -dev packages;
# tests run through qemu-user: cmake -DCMAKE_TOOLCHAIN_FILE=<this> ...,
# then ctest (the emulator below runs each test program). docs/BUILD.md.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMF_CROSS_TRIPLE aarch64-linux-gnu)

set(CMAKE_C_COMPILER ${CMF_CROSS_TRIPLE}-gcc)
# the multiarch libraries and headers live under /usr; the C library's
# loader and libc under /usr/aarch64-linux-gnu
set(CMAKE_FIND_ROOT_PATH /usr/${CMF_CROSS_TRIPLE} /usr/lib/${CMF_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_LIBRARY_ARCHITECTURE ${CMF_CROSS_TRIPLE})
# pkg-config reads only the arm64 .pc files
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/${CMF_CROSS_TRIPLE}/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")
# qemu-user runs the arm64 loader itself: with `-L /usr/aarch64-linux-gnu`
# instead, qemu 7.2 (Debian 12) spins forever in the first pthread_create
set(CMAKE_CROSSCOMPILING_EMULATOR
    qemu-aarch64;/usr/${CMF_CROSS_TRIPLE}/lib/ld-linux-aarch64.so.1;--library-path;/usr/${CMF_CROSS_TRIPLE}/lib)
