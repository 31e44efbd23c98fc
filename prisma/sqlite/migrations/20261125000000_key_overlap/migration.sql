-- AlterTable
ALTER TABLE "key_pairs" ADD COLUMN "retires_at" DATETIME;
ALTER TABLE "key_pairs" ADD COLUMN "switched_at" DATETIME;
ALTER TABLE "key_pairs" ADD COLUMN "after_switch_seconds" INTEGER;
