# Rewrites tests/golden from the current build: cmake -DVP=<tessera-vp> -DSRC=<source dir> -P this
execute_process(COMMAND ${VP} --dump-config -p ${SRC}/platform/t1.json
                OUTPUT_FILE ${SRC}/tests/golden/t1.dump-config.json RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tessera-vp --dump-config failed (${rc})")
endif()
