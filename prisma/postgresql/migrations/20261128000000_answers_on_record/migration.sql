-- AlterTable
ALTER TABLE "gate_decisions" ADD COLUMN "method" TEXT;
ALTER TABLE "gate_decisions" ADD COLUMN "path" TEXT;
ALTER TABLE "gate_decisions" ADD COLUMN "engine_status" INTEGER;
ALTER TABLE "gate_decisions" ADD COLUMN "engine_ms" INTEGER;
ALTER TABLE "gate_decisions" ADD COLUMN "trace_id" TEXT;
