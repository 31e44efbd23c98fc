-- AlterTable
ALTER TABLE "gate_decisions_unrecorded" DROP CONSTRAINT "gate_decisions_unrecorded_pkey",
ADD COLUMN "held_by" TEXT NOT NULL DEFAULT '',
ADD CONSTRAINT "gate_decisions_unrecorded_pkey" PRIMARY KEY ("minute","instance_id","key_kind","key_value","held_by");

