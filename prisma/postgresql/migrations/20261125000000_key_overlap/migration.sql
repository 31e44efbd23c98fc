-- AlterTable
ALTER TABLE "key_pairs" ADD COLUMN "retires_at" TIMESTAMP(3),
ADD COLUMN "switched_at" TIMESTAMP(3),
ADD COLUMN "after_switch_seconds" INTEGER;
