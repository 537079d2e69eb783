#pragma once
namespace fbgemm {
long gemm_checksum(long n);
}
