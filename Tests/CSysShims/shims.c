#include "csysshims.h"
