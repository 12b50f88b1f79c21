//! The 80 COCO class names in the order of the model's class outputs.

/// COCO-80 labels, indexed by the model's class id.
pub const COCO80: [&str; 80] = [
    "person",
    "bicycle",
    "car",
    "motorcycle",
    "airplane",
    "bus",
    "train",
    "truck",
    "boat",
    "traffic light",
    "fire hydrant",
    "stop sign",
    "parking meter",
    "bench",
    "bird",
    "cat",
    "dog",
    "horse",
    "sheep",
    "cow",
    "elephant",
    "bear",
    "zebra",
    "giraffe",
    "backpack",
    "umbrella",
    "handbag",
    "tie",
    "suitcase",
    "frisbee",
    "skis",
    "snowboard",
    "sports ball",
    "kite",
    "baseball bat",
    "baseball glove",
    "skateboard",
    "surfboard",
    "tennis racket",
    "bottle",
    "wine glass",
    "cup",
    "fork",
    "knife",
    "spoon",
    "bowl",
    "banana",
    "apple",
    "sandwich",
    "orange",
    "broccoli",
    "carrot",
    "hot dog",
    "pizza",
    "donut",
    "cake",
    "chair",
    "couch",
    "potted plant",
    "bed",
    "dining table",
    "toilet",
    "tv",
    "laptop",
    "mouse",
    "remote",
    "keyboard",
    "cell phone",
    "microwave",
    "oven",
    "toaster",
    "sink",
    "refrigerator",
    "book",
    "clock",
    "vase",
    "scissors",
    "teddy bear",
    "hair drier",
    "toothbrush",
];

/// The class id of a label name, if it is one of the COCO-80 names.
pub fn class_id(label: &str) -> Option<usize> {
    COCO80.iter().position(|l| *l == label)
}

/// Classes the detector confuses with each other on the same object (a parked car called
/// `car` in one frame and `truck` in the next): road vehicles. The tracker associates
/// detections across such classes and keeps a track's label by vote.
pub fn confusable(a: usize, b: usize) -> bool {
    const VEHICLES: [&str; 4] = ["car", "truck", "bus", "motorcycle"];
    let vehicle = |c: usize| COCO80.get(c).is_some_and(|l| VEHICLES.contains(l));
    a == b || (vehicle(a) && vehicle(b))
}
