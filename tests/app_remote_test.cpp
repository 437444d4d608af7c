// (filled in by the work in progress)
#include <gtest/gtest.h>
