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

/// Road vehicles: one group of [`confusable`] classes.
const VEHICLES: [&str; 4] = ["car", "truck", "bus", "motorcycle"];

/// Animals: the other group of [`confusable`] classes.
const ANIMALS: [&str; 10] = [
    "bird", "cat", "dog", "horse", "sheep", "cow", "elephant", "bear", "zebra", "giraffe",
];

/// Classes the detector confuses with each other on the same object: road vehicles (a parked
/// car called `car` in one frame and `truck` in the next) and animals (a cat called `dog`, a
/// distant dog `sheep`, a small one `bird`). The tracker associates detections across such
/// classes and keeps a track's label by vote. A person is confusable with nothing else.
pub fn confusable(a: usize, b: usize) -> bool {
    let group = |c: usize| {
        let label = COCO80.get(c)?;
        if VEHICLES.contains(label) {
            Some(0)
        } else if ANIMALS.contains(label) {
            Some(1)
        } else {
            None
        }
    };
    a == b || group(a).is_some_and(|g| group(b) == Some(g))
}

/// The label of a class id (`class_<id>` if outside COCO-80).
pub fn label(class_id: usize) -> String {
    COCO80
        .get(class_id)
        .map(|s| s.to_string())
        .unwrap_or_else(|| format!("class_{class_id}"))
}
