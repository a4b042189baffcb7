# TANDEM_SANITIZE: build every tandem target (libraries, tests, the `tandem` binary) with gcc's or
# clang's sanitizers: "address,undefined" (ASan + UBSan + LeakSanitizer) or "thread" (TSan).
# Any report aborts the program (no recovery), so a report fails the test that produced it.
# scripts/test-sanitizers is the driver; an empty value (the default) adds nothing.
set(TANDEM_SANITIZE "" CACHE STRING
    "Sanitizers for every target: empty, address,undefined, or thread")
set_property(CACHE TANDEM_SANITIZE PROPERTY STRINGS "" "address,undefined" "thread")

if(TANDEM_SANITIZE)
  if(NOT TANDEM_SANITIZE MATCHES "^(address|undefined|address,undefined|undefined,address|thread)$")
    message(FATAL_ERROR "TANDEM_SANITIZE='${TANDEM_SANITIZE}': expected address,undefined or thread "
                        "(TSan cannot be combined with ASan)")
  endif()
  set(tandem_sanitize_flags -fsanitize=${TANDEM_SANITIZE} -fno-sanitize-recover=all
                            -fno-omit-frame-pointer)
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:${tandem_sanitize_flags}>")
  add_link_options(${tandem_sanitize_flags})
  message(STATUS "tandem: sanitizers ${TANDEM_SANITIZE}")
endif()
