-- AlterTable
ALTER TABLE "serve_instances" ADD COLUMN "clock_offset_ms" INTEGER;
