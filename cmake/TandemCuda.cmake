# tandem_find_cuda(): whether the CUDA parts of tandem are built, and what they compile and link
# against. Sets in the caller's scope TANDEM_HAVE_CUDA (0 or 1), TANDEM_CUDA_INCLUDE_DIRS and
# TANDEM_CUDART_LIBRARY. A plain library path rather than CUDA::cudart, so the installed package
# needs no CUDAToolkit package (as dist/ does for NCCL). Not a place for kernels' nvcc settings.
option(TANDEM_CUDA "Build the CUDA backend when the CUDA toolkit is found" ON)

macro(tandem_find_cuda)
  set(TANDEM_HAVE_CUDA 0)
  set(TANDEM_CUDA_INCLUDE_DIRS "")
  if(TANDEM_CUDA)
    find_package(CUDAToolkit QUIET)
    if(CUDAToolkit_FOUND)
      find_library(TANDEM_CUDART_LIBRARY cudart HINTS ${CUDAToolkit_LIBRARY_DIR})
      if(TANDEM_CUDART_LIBRARY)
        set(TANDEM_HAVE_CUDA 1)
        set(TANDEM_CUDA_INCLUDE_DIRS ${CUDAToolkit_INCLUDE_DIRS})
      endif()
    endif()
  endif()
endmacro()

# tandem_enable_cuda_kernels(): called once from the top-level CMakeLists (enable_language must be
# there). Where the toolkit is found and TANDEM_CUDA_KERNELS is on, enables the CUDA language
# (nvcc, for sm_80 and sm_90 unless CMAKE_CUDA_ARCHITECTURES says otherwise, the shared CUDA
# runtime the device layer links) and sets TANDEM_HAVE_CUDA_KERNELS to 1: ops/cuda/ is then built.
# The libraries the kernels call are plain paths, as for cudart: TANDEM_CUBLAS_LIBRARY,
# TANDEM_CUBLASLT_LIBRARY, TANDEM_CUDNN_LIBRARY.
option(TANDEM_CUDA_KERNELS
       "Build the CUDA kernels (ops/cuda) when nvcc, cuBLAS and cuDNN are found" ON)

macro(tandem_enable_cuda_kernels)
  set(TANDEM_HAVE_CUDA_KERNELS 0)
  tandem_find_cuda()
  if(TANDEM_HAVE_CUDA AND TANDEM_CUDA_KERNELS)
    find_library(TANDEM_CUBLAS_LIBRARY cublas HINTS ${CUDAToolkit_LIBRARY_DIR})
    find_library(TANDEM_CUBLASLT_LIBRARY cublasLt HINTS ${CUDAToolkit_LIBRARY_DIR})
    find_library(TANDEM_CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR})
    find_path(TANDEM_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    if(NOT CMAKE_CUDA_COMPILER AND CUDAToolkit_NVCC_EXECUTABLE)
      set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE})
    endif()
    include(CheckLanguage)
    check_language(CUDA)
    if(CMAKE_CUDA_COMPILER AND TANDEM_CUBLAS_LIBRARY AND TANDEM_CUBLASLT_LIBRARY
       AND TANDEM_CUDNN_LIBRARY AND TANDEM_CUDNN_INCLUDE_DIR)
      if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
        set(CMAKE_CUDA_ARCHITECTURES 80 90)
      endif()
      set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
      enable_language(CUDA)
      # CMake 3.25 cannot spell C++20 for nvcc (the layers ask for cxx_std_20, which CUDA sources
      # inherit): nvcc 12 and later take -std=c++20.
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
      set(TANDEM_HAVE_CUDA_KERNELS 1)
    else()
      message(STATUS "tandem: CUDA kernels not built (nvcc '${CMAKE_CUDA_COMPILER}', cuBLAS "
                     "'${TANDEM_CUBLAS_LIBRARY}', cuDNN '${TANDEM_CUDNN_LIBRARY}')")
    endif()
  endif()
  message(STATUS "tandem: CUDA kernels ${TANDEM_HAVE_CUDA_KERNELS}")
endmacro()
