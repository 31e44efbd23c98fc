-- AlterTable
ALTER TABLE "gate_decisions" ADD COLUMN "bytes" INTEGER;
