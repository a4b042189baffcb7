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
